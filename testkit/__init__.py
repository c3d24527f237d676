"""What the tests and the benches share: contract-shaped crash reports, logging in to the pages
through the real form, and Grafana's expansion of dashboard SQL. Never imported by the product
(registry/, sync/, dashboards/, agents/): tests/foundation/test_test_layout.py holds both sides to it."""
