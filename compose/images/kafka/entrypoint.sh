#!/bin/bash
# Renders this node's configuration from the environment and execs the JVM.
#   ROLE=zookeeper | broker (ZooKeeper mode) | kraft (combined broker+controller)
#        | kraft-broker | kraft-controller (KRaft with separate controllers)
#   NODE_ID, HOST_PORT (the 127.0.0.1 port the harness reaches this broker on; not for
#   a controller), VOTERS (KRaft, a static quorum), ZK_CONNECT (broker), CLUSTER_ID (KRaft),
#   BOOTSTRAP_CONTROLLERS (KRaft, a dynamic quorum, KIP-853: host:port,... instead of VOTERS)
#   and INITIAL_CONTROLLERS (its first voters, id@host:port:directory-id,...; a node
#   formatted without them joins as an observer until it is added),
#   BROKER_CONFIG ("k=v;k=v", appended last so it overrides; chaos.format.feature.* below),
#   HEAP (default 512m), JOIN_GATE (a spare: wait for this file before starting),
#   BYTEMAN (1 = load the agent with a listener on 127.0.0.1:9091), BYTEMAN_SCRIPT.
set -euo pipefail
ROLE=${ROLE:?ROLE must be zookeeper, broker, kraft, kraft-broker or kraft-controller}
HEAP=${HEAP:-512m}
RUN=/opt/kafka/run
mkdir -p "$RUN" /data /chaos
# a spare node (JOIN_GATE, set by the harness): the process starts once a `join` step
# writes that file (it stays, so a restart of a joined node starts at once)
if [ -n "${JOIN_GATE:-}" ]; then
  while [ ! -e "$JOIN_GATE" ]; do sleep 0.2; done
fi
CP="/opt/kafka/libs/*"
if ls /opt/kafka/libs | grep -qE '^(reload4j-|log4j-1[.]2)'; then
  LOG_OPTS="-Dlog4j.configuration=file:/opt/kafka/config/log4j.properties"
else
  LOG_OPTS="-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties"
fi
JVM_OPTS="-Xms128m -Xmx$HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Dkafka.logs.dir=/data/logs $LOG_OPTS"

if [ "$ROLE" = zookeeper ]; then
  cat > "$RUN/zk.properties" <<PROPS
dataDir=/data/zookeeper
clientPort=2181
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
tickTime=2000
PROPS
  exec java $JVM_OPTS -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$RUN/zk.properties"
fi

NODE_ID=${NODE_ID:?NODE_ID is required}
HOST=$(hostname)
P="$RUN/server.properties"
case "$ROLE" in
  kraft|kraft-broker|kraft-controller)
    case "$ROLE" in
      kraft) ROLES=broker,controller; LISTENERS=EXTERNAL://:9092,CONTROLLER://:9093,INTERNAL://:9094 ;;
      kraft-broker) ROLES=broker; LISTENERS=EXTERNAL://:9092,INTERNAL://:9094 ;;
      kraft-controller) ROLES=controller; LISTENERS=CONTROLLER://:9093 ;;
    esac
    cat > "$P" <<PROPS
process.roles=$ROLES
node.id=$NODE_ID
controller.listener.names=CONTROLLER
listeners=$LISTENERS
PROPS
    if [ -n "${BOOTSTRAP_CONTROLLERS:-}" ]; then
      # a dynamic quorum: the voters live in the metadata log, found through these
      echo "controller.quorum.bootstrap.servers=$BOOTSTRAP_CONTROLLERS" >> "$P"
    else
      echo "controller.quorum.voters=${VOTERS:?VOTERS is required}" >> "$P"
    fi
    ;;
  broker)
    cat > "$P" <<PROPS
broker.id=$NODE_ID
zookeeper.connect=${ZK_CONNECT:-zk:2181}
zookeeper.session.timeout.ms=6000
listeners=EXTERNAL://:9092,INTERNAL://:9094
PROPS
    ;;
  *) echo "unknown ROLE $ROLE" >&2; exit 2 ;;
esac
# a controller of a dynamic quorum advertises its controller listener: a voter added by
# kafka-metadata-quorum add-controller is reached where it advertises it
CONTROLLER_AD=""
if [ -n "${BOOTSTRAP_CONTROLLERS:-}" ] && [ "$ROLE" != kraft-broker ]; then
  CONTROLLER_AD=",CONTROLLER://$HOST:9093"
fi
if [ "$ROLE" != kraft-controller ]; then
  HOST_PORT=${HOST_PORT:?HOST_PORT is required}
  cat >> "$P" <<PROPS
advertised.listeners=EXTERNAL://127.0.0.1:$HOST_PORT,INTERNAL://$HOST:9094$CONTROLLER_AD
inter.broker.listener.name=INTERNAL
PROPS
elif [ -n "$CONTROLLER_AD" ]; then
  echo "advertised.listeners=${CONTROLLER_AD#,}" >> "$P"
fi
# (a static quorum's controller-only node advertises nothing: clients and brokers never
# reach it there)
cat >> "$P" <<PROPS
listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=/data/kafka
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
num.partitions=1
default.replication.factor=3
min.insync.replicas=1
offsets.topic.num.partitions=4
offsets.topic.replication.factor=3
transaction.state.log.num.partitions=4
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
unclean.leader.election.enable=false
log.segment.bytes=67108864
log.retention.check.interval.ms=300000
replica.lag.time.max.ms=10000
PROPS
# chaos.format.feature.<feature>=<level> in BROKER_CONFIG is no broker property: it sets a
# feature level when a new KRaft node formats its storage (kafka-storage format --feature,
# Kafka 3.9+), e.g. chaos.format.feature.eligible.leader.replicas.version=0
FEATURES=()
if [ -n "${BROKER_CONFIG:-}" ]; then
  while IFS= read -r kv || [ -n "$kv" ]; do
    case "$kv" in
      chaos.format.feature.*=*) FEATURES+=(--feature "${kv#chaos.format.feature.}") ;;
      "") ;;
      *) printf '%s\n' "$kv" >> "$P" ;;
    esac
  done < <(tr ';' '\n' <<<"$BROKER_CONFIG")
fi

QUORUM=()
if [ -n "${INITIAL_CONTROLLERS:-}" ]; then
  QUORUM=(--initial-controllers "$INITIAL_CONTROLLERS")
elif [ -n "${BOOTSTRAP_CONTROLLERS:-}" ] && [ "$ROLE" != kraft-broker ]; then
  QUORUM=(--no-initial-controllers)  # a controller that joins as an observer (a broker needs neither)
fi
if [ "$ROLE" != broker ] && [ ! -f /data/kafka/meta.properties ]; then
  java -Xmx256m $LOG_OPTS -cp "$CP" kafka.tools.StorageTool format -t "${CLUSTER_ID:?CLUSTER_ID is required}" -c "$P" --ignore-formatted "${FEATURES[@]}" "${QUORUM[@]}"
fi

if [ "${BYTEMAN:-1}" = 1 ]; then
  AGENT="-javaagent:/opt/byteman/byteman.jar=listener:true,address:127.0.0.1,port:9091,boot:/opt/byteman/byteman.jar"
  if [ -n "${BYTEMAN_SCRIPT:-}" ]; then AGENT="$AGENT,script:$BYTEMAN_SCRIPT"; fi
  JVM_OPTS="$JVM_OPTS $AGENT -Dorg.jboss.byteman.compile.to.bytecode=true"
fi
exec java $JVM_OPTS -cp "$CP" kafka.Kafka "$P"
