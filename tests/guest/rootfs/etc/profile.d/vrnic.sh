# Interactive guest shell: say where we are.
PS1='\h:\w\$ '
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/vrnic/tests
