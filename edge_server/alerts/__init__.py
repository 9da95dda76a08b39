"""Alerts for the stop team (issue 41): what a violation tells the officers down the road.

* :mod:`~edge_server.alerts.schemas` - the API's view of a violation's next checkpoint;
* the phone page itself is a console page (``/console/alert``: edge_server.console and its assets);
  the direction of travel and the checkpoint come from the engine's pure functions
  (pipelines.checkpoints) when a violation is recorded (edge_server.violations).

It imports pydantic only; the API schemas (edge_server.schemas) import it.
"""
