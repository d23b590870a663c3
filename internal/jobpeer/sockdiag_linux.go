package jobpeer

// The kernel's own word on who made the other end of a local TCP
// connection: NETLINK_SOCK_DIAG (sock_diag(7)), one exact lookup by the
// four-tuple. golang.org/x/sys/unix has the netlink constants but not the
// inet_diag structures, and the netlink libraries we looked at return the
// socket's fixed fields but not its attribute list (where the cgroup id
// is): the two fixed-size structures are encoded here by hand.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Layout of the messages (include/uapi/linux/inet_diag.h, netlink.h).
const (
	nlmsgHdrLen    = 16 // struct nlmsghdr
	sockIDLen      = 48 // struct inet_diag_sockid
	diagReqV2Len   = 8 + sockIDLen
	diagMsgLen     = 4 + sockIDLen + 20 // struct inet_diag_msg
	attrCgroupID   = 21                 // INET_DIAG_CGROUP_ID: u64, the cgroup v2 id the socket was made in
	diagNoCookie   = 0xffffffff         // INET_DIAG_NOCOOKIE
	diagRecvBuffer = 8192               // one answer with its attributes fits many times over
)

// peerSocket is what the kernel says of one socket.
type peerSocket struct {
	// inode is the socket's inode, 0 once no process holds it (an orphan
	// the owner closed, a time-wait entry).
	inode uint32
	uid   uint32
	// cgroup is the id of the cgroup v2 group the socket was created in
	// (the creator's group then; later moves of the process do not change
	// it); hasCgroup is false where the kernel sends none (time-wait).
	cgroup    uint64
	hasCgroup bool
}

// errNoSocket: no socket with that four-tuple in this network namespace
// (the client is on another machine or namespace, or long gone).
var errNoSocket = errors.New("no such socket")

// lookupSocket asks for the TCP socket whose own address is src and whose
// peer is dst: called with the client's address as src, it finds the
// client's socket when the client is local.
func lookupSocket(src, dst netip.AddrPort) (peerSocket, error) {
	family := uint8(unix.AF_INET6)
	if src.Addr().Unmap().Is4() && dst.Addr().Unmap().Is4() {
		// A v4 client of a dual-stack listener: its socket is a v4 one
		// (or a v6 one with mapped addresses, hashed as v4 alike).
		family = unix.AF_INET
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	}
	req := make([]byte, nlmsgHdrLen+diagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST) // one socket, not a dump
	ne.PutUint32(req[8:], 1)                  // sequence
	r := req[nlmsgHdrLen:]
	r[0] = family
	r[1] = unix.IPPROTO_TCP
	// idiag_ext stays 0: the cgroup id comes with every answer.
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putAddr(id[4:20], src.Addr(), family)
	putAddr(id[20:36], dst.Addr(), family)
	if z := src.Addr().Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			ne.PutUint32(id[36:], uint32(ifi.Index))
		}
	}
	ne.PutUint32(id[40:], diagNoCookie)
	ne.PutUint32(id[44:], diagNoCookie)

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return peerSocket{}, fmt.Errorf("open sock_diag netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return peerSocket{}, fmt.Errorf("send sock_diag request: %w", err)
	}
	buf := make([]byte, diagRecvBuffer)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return peerSocket{}, fmt.Errorf("read sock_diag answer: %w", err)
	}
	return parseDiagAnswer(buf[:n])
}

func putAddr(dst []byte, a netip.Addr, family uint8) {
	if family == unix.AF_INET {
		b := a.As4()
		copy(dst, b[:])
		return
	}
	b := a.As16()
	copy(dst, b[:])
}

// parseDiagAnswer reads the first message of an answer: an inet_diag_msg
// with its attributes, or a netlink error.
func parseDiagAnswer(b []byte) (peerSocket, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen {
		return peerSocket{}, fmt.Errorf("sock_diag answer of %d bytes is too short", len(b))
	}
	mlen := int(ne.Uint32(b[0:]))
	typ := ne.Uint16(b[4:])
	if mlen < nlmsgHdrLen || mlen > len(b) {
		return peerSocket{}, fmt.Errorf("sock_diag answer says %d bytes, has %d", mlen, len(b))
	}
	body := b[nlmsgHdrLen:mlen]
	switch typ {
	case unix.NLMSG_ERROR:
		if len(body) < 4 {
			return peerSocket{}, errors.New("sock_diag error answer too short")
		}
		errno := -int32(ne.Uint32(body))
		if errno == 0 {
			return peerSocket{}, errNoSocket
		}
		if unix.Errno(errno) == unix.ENOENT {
			return peerSocket{}, errNoSocket
		}
		return peerSocket{}, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return peerSocket{}, fmt.Errorf("sock_diag answer of type %d", typ)
	}
	if len(body) < diagMsgLen {
		return peerSocket{}, fmt.Errorf("inet_diag_msg of %d bytes is too short", len(body))
	}
	var p peerSocket
	p.uid = ne.Uint32(body[4+sockIDLen+12:])
	p.inode = ne.Uint32(body[4+sockIDLen+16:])
	attrs := body[diagMsgLen:]
	for len(attrs) >= 4 {
		alen := int(ne.Uint16(attrs[0:]))
		atyp := ne.Uint16(attrs[2:]) & 0x3fff // without the nested/byte-order flags
		if alen < 4 || alen > len(attrs) {
			break
		}
		if atyp == attrCgroupID && alen >= 12 {
			p.cgroup = ne.Uint64(attrs[4:])
			p.hasCgroup = true
		}
		step := (alen + 3) &^ 3
		if step > len(attrs) {
			break
		}
		attrs = attrs[step:]
	}
	return p, nil
}
