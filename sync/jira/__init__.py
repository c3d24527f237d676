"""Two-way Jira sync: one issue per signature; Jira's resolution flows back, the fleet's news flows out."""
