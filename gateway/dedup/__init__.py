"""Duplicates (SPEC §3): a file's content identity, and the copies of one content grouped.

:mod:`gateway.dedup.identity` names what identifies a file's bytes (a git blob id,
Zoekt's checksum) and how a backend hands identities to ranking;
:mod:`gateway.dedup.group` merges the entries of one identity among a ranking's, looking
again at a local copy only where it is shown.
"""

from gateway.dedup.group import Deferred, Entry, by_claim
from gateway.dedup.identity import GIT, ZOEKT, Identities, blob_id, git_identity, zoekt_identity

__all__ = ["GIT", "ZOEKT", "Deferred", "Entry", "Identities", "blob_id", "by_claim", "git_identity", "zoekt_identity"]
