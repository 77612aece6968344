#!/bin/bash
set -e
printf '#!/bin/bash\necho hello\n' > /app/greet.sh
chmod +x /app/greet.sh
