"""The runtime: rendering context, running steps under a lease, recovering."""
