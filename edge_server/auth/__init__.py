"""People and roles (issue 41): who may call which route, and how they prove it.

* :mod:`~edge_server.auth.roles` - the roles (admin, officer, viewer for people; publisher too for
  machines), the kinds of access a route needs, and who has which;
* :mod:`~edge_server.auth.passwords` - Argon2id hashes (``argon2-cffi``) and the password rule;
* :mod:`~edge_server.auth.limiter` - failed sign-ins counted per user name and per address;
* :mod:`~edge_server.auth.authenticator` - a bearer token to a :class:`Principal` (the server's API
  token: an admin machine token; a user's sign-in token; a machine token), cached for a moment;
* :mod:`~edge_server.auth.accounts` - sign-in, users and tokens, every change in the audit trail;
* :mod:`~edge_server.auth.cli` - ``airpatrol users`` and ``airpatrol tokens``.

It imports the store and the audit trail; the routes (``edge_server.routes``) and the middleware
import it.
"""
