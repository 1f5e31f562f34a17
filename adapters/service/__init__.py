"""The HTTP service (`ctxstore serve`): the facade over HTTP, for SDKs in any language."""

from ctxstore.adapters.service.app import create_app

__all__ = ["create_app"]
