package fuel

import ()
