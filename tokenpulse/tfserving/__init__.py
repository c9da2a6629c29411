"""TF Serving's protocol, in one place and without TensorFlow: config files, status, predict.

- `config`: the text config files (models, batching parameters, monitoring), via `textformat`;
- `status`: model status and metadata documents, version states;
- `predict`: predict request and response encoding, the `{"b64": ...}` convention;
- `errors`: the error types every TF Serving client raises.

Components keep their own transport (aiohttp, urllib) and use these for the protocol.
"""
