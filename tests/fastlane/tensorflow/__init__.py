"""`make test-fast` puts this folder first on PYTHONPATH: a test that imports TensorFlow, in
its own process or a child, fails here with this message instead of taking seconds."""

raise ImportError("the fast lane (make test-fast) imports no TensorFlow: mark this test slow")
