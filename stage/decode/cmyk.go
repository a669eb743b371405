package decode

// cmykToRGB converts packed CMYK to RGB the way Pillow does (Convert.c
// cmyk2rgb). inverted says the stored values are Adobe-inverted (an APP14
// "Adobe" segment is present), as libjpeg returns them.
func cmykToRGB(dst, src []byte, inverted bool) {
	n := len(src) / 4
	dst = dst[:n*3]
	src = src[:n*4]
	for i := 0; i < n; i++ {
		c, m, y, k := int(src[4*i]), int(src[4*i+1]), int(src[4*i+2]), int(src[4*i+3])
		if inverted {
			c, m, y, k = 255-c, 255-m, 255-y, 255-k
		}
		nk := 255 - k
		dst[3*i] = clip8(nk - muldiv255(c, nk))
		dst[3*i+1] = clip8(nk - muldiv255(m, nk))
		dst[3*i+2] = clip8(nk - muldiv255(y, nk))
	}
}

func muldiv255(a, b int) int {
	t := a*b + 128
	return ((t >> 8) + t) >> 8
}

func clip8(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// hasAdobeMarker reports whether the JPEG has an APP14 "Adobe" segment
// before its first scan.
func hasAdobeMarker(data []byte) bool {
	i := 2
	for i+4 <= len(data) {
		if data[i] != 0xFF {
			return false
		}
		marker := data[i+1]
		if marker == 0xFF { // fill byte
			i++
			continue
		}
		if marker == 0xDA || marker == 0xD9 { // SOS, EOI
			return false
		}
		n := int(data[i+2])<<8 | int(data[i+3])
		if marker == 0xEE && n >= 7 && i+4+5 <= len(data) && string(data[i+4:i+9]) == "Adobe" {
			return true
		}
		i += 2 + n
	}
	return false
}
