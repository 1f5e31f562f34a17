"""The API's routers, one module per resource; `create_app` includes them all."""
