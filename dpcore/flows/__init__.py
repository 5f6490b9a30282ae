"""Origin/destination flows over public hierarchies: InfTDA and its baselines, export, figures."""
