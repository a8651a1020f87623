-- Reads the slot's marker, creating it when missing and writing a loss it shows, as the first
-- batch in the slot would (`--state-new` creates every slot's marker at start-up, so a
-- replica started later never takes a slot no batch has used yet for one that lost its
-- data). KEYS[1] and KEYS[2] are unused (the marker's key again).

return {'', '', epoch, tostring(seq)}
