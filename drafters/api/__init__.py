"""The HTTP side of `drafters`: the read-only JSON API and the Hub webhook endpoint in one ASGI app (app.py),
its bodies (bodies.py), the webhook route (push_route.py) and the uvicorn server that bounds them (server.py)."""
