"""Evidence an officer can stand behind: each violation's signed evidence pack (docs/evidence.md).

* ``keys``: the server's Ed25519 signing key and every public key it had (rotation);
* ``canonical_zip``: the one zip layout a pack is written in, byte for byte;
* ``contents``: the pack's files, from the stored violation and the engine's record of it;
* ``pack``: signing and writing a pack atomically; ``verify``: checking one offline
  (``airpatrol verify``, which needs only the standard library and ``cryptography``);
* ``provenance``: software version and commit, model files' SHA-256, the clock's sync state;
* ``service``: the server's side (records when violations are stored, packs once their clips are);
  ``schemas``: the API's view; ``cli``: ``airpatrol verify`` and ``airpatrol keys``.

Nothing is imported here, so ``verify`` stays light.
"""
