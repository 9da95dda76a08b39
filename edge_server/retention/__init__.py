"""Retention and legal holds (issue 41): how long the server keeps what.

* :mod:`~edge_server.retention.purge` - the policy (``retention_*`` settings), :class:`Purger`
  (what each rule removes, files and rows, every removal in the audit trail), the server's
  periodic run;
* :mod:`~edge_server.retention.schemas` - the API's view;
* :mod:`~edge_server.retention.cli` - ``airpatrol retention show|run|hold|release``.

It imports the store (``edge_server.store``); the app (its start), the routes and the CLI import it.
"""
