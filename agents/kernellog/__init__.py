"""The kernel's own logs on a running host: the /dev/kmsg watcher (`crashreg-report.pyz watch`)
and the pstore reader of the post-boot agent. Standard library only, zipped into the reporter."""
