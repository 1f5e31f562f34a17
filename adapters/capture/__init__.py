"""Capture: the model calls an application makes, recorded as the provider received them
(domain/captured.py), from each SDK's own hooks or OpenTelemetry, off the application's
path (recorder.py)."""
