"""What follows the data: topic configs (R-CS) and consumer-group offsets (R-OFS)."""
