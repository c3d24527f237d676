"""Stateful emulators of the external services crashreg talks to (Jira), served over HTTP."""
