"""What ContextStore offers over the bearer tokens kept in its database (`ctxstore token`)."""

from __future__ import annotations

from collections.abc import Iterable

from ctxstore.adapters.storage.tokens import StoredToken, StoredTokens
from ctxstore.adapters.store.core import StoreCore
from ctxstore.domain.errors import InvalidOperationError
from ctxstore.domain.scopes import parse_scopes


class TokensSurface:
    _core: StoreCore

    @property
    def stored_tokens(self) -> StoredTokens | None:
        """The tokens table (None on memory://), for the HTTP service."""
        return self._core.storage.tokens

    def _tokens(self) -> StoredTokens:
        found = self._core.storage.tokens
        if found is None:
            raise InvalidOperationError("tokens are kept in a SQLite or PostgreSQL store")
        return found

    def create_token(
        self, tenant: str, scopes: Iterable[str] | str, *, name: str | None = None
    ) -> tuple[str, StoredToken]:
        """A new bearer token for `tenant` with `scopes` (read, write, audit, admin): its
        text (shown once; only a hash is kept) and its listing."""
        try:
            granted = parse_scopes(scopes)
        except ValueError as exc:
            raise InvalidOperationError(str(exc)) from None
        return self._tokens().create(tenant, granted, name)

    def revoke_token(self, token_id: str) -> StoredToken:
        """Revoke a token by its id (every service instance refuses it within 5 s)."""
        return self._tokens().revoke(token_id)

    def tokens(self) -> list[StoredToken]:
        """The tokens kept in the database, revoked ones too; never their secrets."""
        return self._tokens().list()
