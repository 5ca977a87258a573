#!/bin/bash
# Renders this node's configuration from the environment and execs the JVM.
#   ROLE=zookeeper  ZooKeeper; once it answers, the cluster metadata is initialized
#                   (PulsarClusterMetadataSetup, idempotent) and port 2182 opens to say
#                   "metadata ready" -- bookies and brokers wait for it. INIT=0 skips this.
#   ROLE=init       only the metadata initialization, against ZK_CONNECT (one-shot).
#   ROLE=bookie     a BookKeeper bookie (DbLedgerStorage, journal fsync on).
#   ROLE=broker     a Pulsar broker with two listeners: `internal` (hostname, cluster
#                   traffic) and `external` (127.0.0.1:HOST_PORT / ADMIN_PORT, the harness).
# Environment:
#   CLUSTER (default chaos), ZK_CONNECT (default zookeeper:2181 -- not "zk:2181": Pulsar strips
#   the "zk:" scheme prefix twice, so a host called zk becomes "2181"), BROKERS (zookeeper/init: broker
#   hostnames for the cluster's service URLs, default broker-1,broker-2),
#   HOST_PORT, ADMIN_PORT (broker: the 127.0.0.1 ports published for 6650 / 8080),
#   BROKER_CONFIG / BOOKIE_CONFIG ("k=v;k=v", appended last so they override),
#   HEAP, DIRECT_MEM (JVM sizes; defaults per role below), JOIN_GATE (a spare: wait for this
#   file before starting),
#   BYTEMAN (bookie/broker: 1 = load the agent with a listener on 127.0.0.1:9091), BYTEMAN_SCRIPT.
set -euo pipefail
ROLE=${ROLE:?ROLE must be zookeeper, init, bookie or broker}
CLUSTER=${CLUSTER:-chaos}
ZK_CONNECT=${ZK_CONNECT:-zookeeper:2181}
ZK_HOST=${ZK_CONNECT%%:*}
RUN=/opt/pulsar/run
CP="/opt/pulsar/libs/*"
mkdir -p "$RUN" /data /chaos
# a spare node (JOIN_GATE, set by the harness): the process starts once a `join` step
# writes that file (it stays, so a restart of a joined node starts at once)
if [ -n "${JOIN_GATE:-}" ]; then
  while [ ! -e "$JOIN_GATE" ]; do sleep 0.2; done
fi
HOST=$(hostname)

case "$ROLE" in
  zookeeper) HEAP=${HEAP:-128m}; DIRECT_MEM=${DIRECT_MEM:-64m} ;;
  init)      HEAP=${HEAP:-256m}; DIRECT_MEM=${DIRECT_MEM:-64m} ;;
  bookie)    HEAP=${HEAP:-256m}; DIRECT_MEM=${DIRECT_MEM:-256m} ;;
  broker)    HEAP=${HEAP:-384m}; DIRECT_MEM=${DIRECT_MEM:-256m} ;;
  *) echo "entrypoint: unknown ROLE=$ROLE (zookeeper, init, bookie, broker)" >&2; exit 2 ;;
esac

# The flags bin/pulsar adds (Netty/BookKeeper reflective access, the metadata-store drivers
# BookKeeper resolves "metadata-store:" URIs with), and a GC suited to small heaps.
JVM_OPTS="-Xms64m -Xmx$HEAP -XX:MaxDirectMemorySize=$DIRECT_MEM -XX:+UseG1GC -XX:MaxGCPauseMillis=20
 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true
 -Djute.maxbuffer=10485760 -Dlog4j2.configurationFile=/opt/pulsar/config/log4j2.properties
 -Dlog4j.shutdownHookEnabled=false -Dpulsar.allocator.exit_on_oom=true
 -Dio.netty.tryReflectionSetAccessible=true -Dio.netty.leakDetection.level=disabled
 --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED
 --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
 --add-opens java.base/sun.net=ALL-UNNAMED --add-opens java.management/sun.management=ALL-UNNAMED
 -Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver
 -Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver"
JVM_OPTS=$(tr '\n' ' ' <<<"$JVM_OPTS")

byteman_opts() {
  if [ "${BYTEMAN:-1}" = 1 ]; then
    local agent="-javaagent:/opt/byteman/byteman.jar=listener:true,address:127.0.0.1,port:9091,boot:/opt/byteman/byteman.jar"
    if [ -n "${BYTEMAN_SCRIPT:-}" ]; then agent="$agent,script:$BYTEMAN_SCRIPT"; fi
    echo "$agent -Dorg.jboss.byteman.compile.to.bytecode=true"
  fi
}

append_overrides() {  # $1 = "k=v;k=v", $2 = file: each pair replaces the key's earlier line
  # (BookKeeper's commons-configuration would turn a repeated key into a list) and goes last.
  local kv
  [ -n "$1" ] || return 0
  IFS=';' read -ra pairs <<<"$1"
  for kv in "${pairs[@]}"; do
    [ -n "$kv" ] || continue
    awk -F= -v k="${kv%%=*}" '$1 != k' "$2" > "$2.tmp" && mv "$2.tmp" "$2"
    echo "$kv" >> "$2"
  done
}

init_metadata() {  # idempotent: PulsarClusterMetadataSetup skips whatever already exists
  local web="" svc="" b
  IFS=',' read -ra names <<<"${BROKERS:-broker-1,broker-2}"
  for b in "${names[@]}"; do web="$web,$b:8080"; svc="$svc,$b:6650"; done
  java $JVM_OPTS -Xmx256m -XX:TieredStopAtLevel=1 -cp "$CP" org.apache.pulsar.PulsarClusterMetadataSetup \
    --cluster "$CLUSTER" --metadata-store "zk:$ZK_CONNECT" --configuration-metadata-store "zk:$ZK_CONNECT" \
    --web-service-url "http://${web#,}" --broker-service-url "pulsar://${svc#,}" \
    --initial-num-stream-storage-containers 0 --initial-num-transaction-coordinators 1
}

wait_metadata() {  # bookies and brokers start once the ZooKeeper node says the metadata exists
  local n=0
  until nc -z -w 2 "$ZK_HOST" 2182 2>/dev/null; do
    n=$((n + 1))
    if [ $((n % 20)) = 0 ]; then echo "entrypoint: waiting for the cluster metadata on $ZK_HOST:2182" >&2; fi
    sleep 0.5
  done
}

if [ "$ROLE" = zookeeper ]; then
  cat > "$RUN/zk.conf" <<PROPS
dataDir=/data/zookeeper
clientPort=2181
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
tickTime=2000
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
PROPS
  if [ "${INIT:-1}" = 1 ]; then
    # In the background of the ZooKeeper process (which stays PID 1 and receives the signals).
    (
      until nc -z -w 1 127.0.0.1 2181 2>/dev/null; do sleep 0.2; done
      if [ ! -f /data/zookeeper/.metadata-initialized ]; then
        until init_metadata; do echo "entrypoint: metadata init failed; retrying" >&2; sleep 2; done
        touch /data/zookeeper/.metadata-initialized
      fi
      exec nc -dlk 2182
    ) &
  fi
  exec java $JVM_OPTS -Dchaos.zk.log.level=info -Dzookeeper.snapshot.trust.empty=true -Dzookeeper.tcpKeepAlive=true \
    -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$RUN/zk.conf"
fi

if [ "$ROLE" = init ]; then
  until nc -z -w 1 "$ZK_HOST" "${ZK_CONNECT##*:}" 2>/dev/null; do sleep 0.5; done
  init_metadata
  exit 0
fi

if [ "$ROLE" = bookie ]; then
  P="$RUN/bookkeeper.conf"
  cat > "$P" <<PROPS
bookiePort=3181
advertisedAddress=$HOST
allowLoopback=false
# no "/ledgers" suffix: it would chroot the store, and the driver adds /ledgers itself
metadataServiceUri=metadata-store:zk:$ZK_CONNECT
zkTimeout=10000
httpServerEnabled=false
journalDirectories=/data/bookkeeper/journal
ledgerDirectories=/data/bookkeeper/ledgers
# durability is real: every add is fsync'ed to the journal before it is acknowledged
journalSyncData=true
journalWriteData=true
journalMaxGroupWaitMSec=1
journalPreAllocSizeMB=4
journalWriteBufferSizeKB=64
ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage
dbStorage_writeCacheMaxSizeMb=32
dbStorage_readAheadCacheMaxSizeMb=16
dbStorage_rocksDB_blockCacheSize=8388608
dbStorage_rocksDB_writeBufferSizeMB=4
entryLogSizeLimit=67108864
entryLogFilePreallocationEnabled=false
flushInterval=60000
gcWaitTime=300000
serverNumIOThreads=2
numAddWorkerThreads=1
numReadWorkerThreads=2
numHighPriorityWorkerThreads=1
numJournalCallbackThreads=2
diskUsageThreshold=0.98
diskUsageWarnThreshold=0.95
PROPS
  append_overrides "${BOOKIE_CONFIG:-}" "$P"
  wait_metadata
  exec java $JVM_OPTS $(byteman_opts) -cp "$CP" org.apache.bookkeeper.server.Main --conf "$P"
fi

# broker
HOST_PORT=${HOST_PORT:?HOST_PORT is required}
ADMIN_PORT=${ADMIN_PORT:?ADMIN_PORT is required}
P="$RUN/broker.conf"
cat > "$P" <<PROPS
clusterName=$CLUSTER
metadataStoreUrl=zk:$ZK_CONNECT
configurationMetadataStoreUrl=zk:$ZK_CONNECT
metadataStoreSessionTimeoutMillis=15000
bindAddress=0.0.0.0
brokerServicePort=6650
webServicePort=8080
advertisedAddress=$HOST
advertisedListeners=internal:pulsar://$HOST:6650,internal:http://$HOST:8080,external:pulsar://127.0.0.1:$HOST_PORT,external:http://127.0.0.1:$ADMIN_PORT
internalListenerName=internal
managedLedgerDefaultEnsembleSize=2
managedLedgerDefaultWriteQuorum=2
managedLedgerDefaultAckQuorum=2
managedLedgerCacheSizeMB=32
managedLedgerNumSchedulerThreads=2
managedLedgerMaxLedgerRolloverTimeMinutes=240
bookkeeperClientNumWorkerThreads=2
bookkeeperClientNumIoThreads=2
bookkeeperNumberOfChannelsPerBookie=4
bookkeeperClientTimeoutInSeconds=30
numIOThreads=2
numHttpServerThreads=8
numOrderedExecutorThreads=2
numCacheExecutorThreadPoolSize=2
functionsWorkerEnabled=false
webSocketServiceEnabled=false
transactionCoordinatorEnabled=false
# topic policies (quorums, deduplication per topic): the default from 2.11, off in 2.10
systemTopicEnabled=true
topicLevelPoliciesEnabled=true
allowAutoTopicCreation=false
brokerDeduplicationEnabled=false
# keep every message, acknowledged or not: the harness's final read must see all that was
# written (Pulsar's default deletes ledgers once all subscriptions acknowledged them)
defaultRetentionTimeInMinutes=-1
defaultRetentionSizeInMB=-1
# placement stays where the harness (or a fault) puts it: no automatic shedding or splits
loadBalancerSheddingEnabled=false
loadBalancerAutoBundleSplitEnabled=false
loadBalancerAutoUnloadSplitBundlesEnabled=false
brokerShutdownTimeoutMs=10000
PROPS
append_overrides "${BROKER_CONFIG:-}" "$P"
wait_metadata
exec java $JVM_OPTS $(byteman_opts) -cp "$CP" org.apache.pulsar.PulsarBrokerStarter --broker-conf "$P"
