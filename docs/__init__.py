"""The guides shipped with AirPatrol: installed as the package ``airpatrol_docs`` (setup.py),
served by the edge server at ``/guide`` (``edge_server.guides``)."""
