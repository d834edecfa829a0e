"""The example suites' top level: one session runs them all (``pytest example_suites``).

The top-level suites measure the endpoint in ``pytest.ini`` (the simulator's
``llama-3.1-8b-h100`` profile); ``methodology/conftest.py`` points its
directory at the small ``tiny`` profile by overriding the ``llm_endpoint``
fixture. ``--llm-endpoint=URL`` on the command line measures that server
everywhere instead.
"""
