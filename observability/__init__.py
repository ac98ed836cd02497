"""What the fleet shows the people who run and pay for it: the rule set (recording rules and
alerts), the Grafana dashboards built in Python, and the monthly chargeback report.

A room between the components (which ship the rules and dashboards to a cluster) and the fleet
model (whose numbers the rules use). It imports neither Pulumi nor the controller; the report
reads only Prometheus.
"""
