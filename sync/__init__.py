"""Integrations that run beside the registry: Jira sync and the job scheduler."""
