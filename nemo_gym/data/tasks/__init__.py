"""Task datasets."""
