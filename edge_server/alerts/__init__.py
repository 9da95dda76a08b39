"""Alerts for the stop team (issue 41): what a violation tells the officers down the road.

* :mod:`~edge_server.alerts.schemas` - the API's view of a violation's next checkpoint and of the
  webhooks' queues;
* :mod:`~edge_server.alerts.webhooks` - outgoing webhooks: queued in the database, sent in order,
  retried, dead-lettered (:class:`WebhookDispatcher`);
* :mod:`~edge_server.alerts.signing` - their HMAC signatures, and a receiver's check (standard
  library only);
* the phone page itself is a console page (``/console/alert``: edge_server.console and its assets);
  the direction of travel and the checkpoint come from the engine's pure functions
  (pipelines.checkpoints) when a violation is recorded (edge_server.violations).

It imports the store and httpx; the app (its start), the routes and the API schemas import it.
"""
