"""Userspace stacks named from debug info before they are fingerprinted (symcaches by build-id),
and fingerprinted again when symbols arrive after the crashes that needed them."""
