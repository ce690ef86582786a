"""What runs produce: report.json, aggregation, baselines, history, summary.txt and report.html."""
