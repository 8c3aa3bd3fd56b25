"""The order emails of a small shop: priorities, delays, retries and dead letters."""
