from floorctl.launch import main

main()
