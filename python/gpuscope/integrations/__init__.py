"""Framework callbacks that own a gpuscope session (docs/zero-code.md):

- ``gpuscope.integrations.lightning.GpuscopeCallback``: a Lightning 2.x
  ``Callback``;
- ``gpuscope.integrations.huggingface.GpuscopeCallback``: a
  ``transformers.TrainerCallback``.

Each records the training loop with the zero-code runner's hooks (a step
per optimizer step, data, forward, backward, optimizer), logs the headline
numbers to the framework's own logger, and writes the report and files at
the end of training. Importing ``gpuscope`` (or this package) imports no
framework: only the module of the framework used does.
"""
