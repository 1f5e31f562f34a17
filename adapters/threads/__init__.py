"""Work on worker threads awaited from an event loop."""
