"""The ``airpatrol`` command (``cli``) and the checks and demo that belong to no one layer: ``demo``
(simulate a flight, process it with the shipped models, score it) and ``doctor`` (what this box has
and lacks). The top of the house: it imports every other package's ``cli`` lazily, and nothing
imports it.
"""
