"""Duplicates (SPEC §3): a file's content identity, and the copies of one content grouped.

:mod:`gateway.dedup.identity` names what identifies a file's bytes (a git blob id,
Zoekt's checksum) and how a backend hands identities to ranking;
:mod:`gateway.dedup.group` finds the entries of one identity among a ranking's.
"""

from gateway.dedup.group import groups
from gateway.dedup.identity import GIT, ZOEKT, Identities, blob_id, git_identity, zoekt_identity

__all__ = ["GIT", "ZOEKT", "Identities", "blob_id", "git_identity", "groups", "zoekt_identity"]
