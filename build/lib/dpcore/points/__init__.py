"""Points on a public grid: mechanisms (one file each), releases, export, figures, evaluation."""
