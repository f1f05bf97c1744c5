"""The local CA and node keystore are reused, and renewed when the node addresses change."""
from __future__ import annotations

import stat

from lab.cluster.embedded.security import (
    KEYSTORE_FILENAME,
    KEYSTORE_PASSWORD_FILENAME,
    ensure_tls_material,
)


# ---- no node needed -------------------------------------------------------------------------
def test_material_is_reused_and_renewed_for_new_addresses(tmp_path):
    first = ensure_tls_material(tmp_path, ["127.0.0.41"])
    assert ensure_tls_material(tmp_path, ["127.0.0.41"]) == first
    assert first.keystore_password not in repr(first)
    for name in (KEYSTORE_FILENAME, KEYSTORE_PASSWORD_FILENAME):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    wider = ensure_tls_material(tmp_path, ["127.0.0.41", "127.0.0.42"])
    assert wider.addresses == ("127.0.0.41", "127.0.0.42") and wider.keystore_password != first.keystore_password
