"""Test data and oracles; imported by tests and bench only, never by the product.

- :mod:`harness.testing.synthetic`: synthetic run directories with a known answer
  (every anomaly count a correct checker reports);
- :mod:`harness.testing.copier_history`: synthetic copier histories (exactly-once) with
  a known answer;
- :mod:`harness.testing.reference_checker`: a plain-Python checker with the same
  anomaly definitions as :mod:`harness.check`, the oracle the Spark job is tested
  and benched against;
- :mod:`harness.testing.mutation`: helpers of the mutation fuzz tests.

``tests/unit/test_layering.py`` checks that no product module imports this package.
"""
