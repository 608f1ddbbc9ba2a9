from rlaunch.boundary import error_boundary
from rlaunch.task.bootstrap import main

with error_boundary("rlaunch.task"):
    main()
