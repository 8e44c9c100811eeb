"""whisker-backend: Whisker's REST API over Goldmane, and the Whisker UI it serves."""
