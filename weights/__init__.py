"""The models shipped with AirPatrol (see README.md here); installed as the package
``airpatrol_weights``, found through ``pipelines.config.DEFAULT_WEIGHTS_DIR``."""
