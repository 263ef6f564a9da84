# analysis.py: revenue per region from sales.csv (README, "Running a cell": `awrepl run -f analysis.py`).
# Run in a named session, it leaves `revenue` behind for the next call (`awrepl -s agent run "revenue"`).
import csv
from collections import defaultdict

revenue = defaultdict(float)
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        revenue[row["region"]] += int(row["units"]) * float(row["price"])

for region, total in sorted(revenue.items(), key=lambda kv: -kv[1]):
    print(f"{region:<6} {total:8.2f}")
