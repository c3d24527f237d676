from .fixtures import clock, jira_emulator, jira_flavour

__all__ = ["clock", "jira_emulator", "jira_flavour"]
