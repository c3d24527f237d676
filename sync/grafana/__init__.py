"""Grafana: the read-only role, the data source and dashboards, annotations, file export."""
