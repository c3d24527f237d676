"""The records every domain shares: reports, events, hosts, signatures and their Jira links,
and the Wiring each domain registers on (wiring.py).

Each domain owns its other tables and its services; these rows are read everywhere, so they
sit below every domain (core imports only the platform modules).
"""
