from rlaunch.task.bootstrap import main

main()
