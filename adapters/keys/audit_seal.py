"""The audit index without user text: filter columns as keyed hashes, the rest sealed.

With keys per context, an index row keeps in plain only what is not user text (position,
context id, version, type, time, batch). Its actor and tenant become keyed hashes (HMAC
under the store's index key, itself a vault key), so `actor = ?` and `tenant = ?` still
filter through their indexes, exactly; actor, tenant and facts (names, metadata, models,
stats) are sealed together with the context's own data key, so an erased context's rows
are unreadable in every copy as its events are.
"""

from __future__ import annotations

import base64
import dataclasses

import orjson

from ctxstore.adapters.keys.cipher import ContextCipher, KeyDestroyedError
from ctxstore.projections.audit import AuditRow

SEALED = "sealed:"
HASHED = "h:"


class AuditSealer:
    def __init__(self, cipher: ContextCipher) -> None:
        self.cipher = cipher

    def hashed(self, value: str) -> str:
        return HASHED + self.cipher.index_hash(value)

    def seal(self, row: AuditRow) -> AuditRow:
        plain = orjson.dumps([row.actor, row.tenant, row.facts])
        sealed = base64.b64encode(self.cipher.encrypt(row.context_id, plain)).decode("ascii")
        return row._replace(
            actor=self.hashed(row.actor),
            tenant=None if row.tenant is None else self.hashed(row.tenant),
            facts=SEALED + sealed,
        )

    def open(self, row: AuditRow) -> AuditRow:
        if not row.facts.startswith(SEALED):
            return row
        try:
            data = self.cipher.decrypt(row.context_id, base64.b64decode(row.facts[len(SEALED) :]))
        except KeyDestroyedError:  # erased between the query and here
            return row._replace(actor="(erased)", tenant=None, facts="{}")
        actor, tenant, facts = orjson.loads(data)
        return row._replace(actor=actor, tenant=tenant, facts=facts)

    def where(self, where: object) -> object:
        """An AuditFilter with its actor and tenant hashed as the rows are."""
        changes = {
            name: self.hashed(value)
            for name in ("actor", "tenant")
            if (value := getattr(where, name)) is not None
        }
        return dataclasses.replace(where, **changes) if changes else where  # type: ignore[type-var]
